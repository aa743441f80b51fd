-- The agent's grow plans span several shelves and keep their plant counts; the mirror keeps the
-- whole list (shelf_id stays the first shelf, for the index and older readers).
ALTER TABLE grow_plans ADD COLUMN shelves jsonb NOT NULL DEFAULT '[]';
ALTER TABLE grow_plans ADD COLUMN plant_count integer CHECK (plant_count IS NULL OR plant_count >= 0);
ALTER TABLE grow_plans ADD COLUMN ended_at timestamptz;
