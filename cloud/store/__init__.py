"""PostgreSQL storage of the cloud service: migrations, pools, row-level security."""
