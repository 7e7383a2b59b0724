-- The template's text as the user sent it (YAML with its comments and layout), beside
-- the parsed document the engine works from; NULL when it came as a JSON object (as
-- Heat's clients send it) or from a parent stack. The dashboard shows and edits it.
ALTER TABLE templates ADD COLUMN source text;
