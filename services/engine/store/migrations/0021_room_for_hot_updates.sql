-- Room on each page of traversal_nodes for the next versions of its rows (issue 18).
-- A node row is updated two or three times per traversal (its reports counted, then
-- done), never in an indexed column. When the new version fits on the row's own page,
-- PostgreSQL writes it as a heap-only tuple (HOT): no entry is added to the primary
-- key's index, and the old version is pruned without a vacuum. With pages filled full
-- (the default) 15% of the node updates of a 10k layered create were HOT; with half
-- of each page left free, 91%. The table is small beside `resources` (a few short
-- rows per resource), so the doubled size costs little. Pages written from now on
-- keep the room.
ALTER TABLE traversal_nodes SET (fillfactor = 50);
