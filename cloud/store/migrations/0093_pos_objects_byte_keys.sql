-- The mirror's provider ids and resource names compare byte by byte (COLLATE "C"), not by the
-- database's locale (docs/decisions.md, issue 10): each row a sync writes is compared with
-- about twenty keys of each of two indexes, and a locale comparison copies both strings and
-- calls strcoll (0.8 ms of a 1,000-order page's 11.6 ms under C.UTF-8; more under a
-- language's locale). The ids are opaque ASCII from the provider: their order, a tie-break of
-- the lists, is the same under C.UTF-8 and only ever needs to be stable.
ALTER TABLE pos_objects
    ALTER COLUMN resource TYPE text COLLATE "C",
    ALTER COLUMN object_id TYPE text COLLATE "C";
