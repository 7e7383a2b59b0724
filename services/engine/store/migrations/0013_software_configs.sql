-- Software configurations (issue 20 item 1): Heat's /software_configs, written by the
-- API and by the engine for OS::Heat::SoftwareConfig and its kin (the config id is the
-- resource's physical id). Immutable once written, as Heat's; `project_id` scopes
-- every read, so another project's config is not found.
CREATE TABLE software_configs (
    config_id   uuid PRIMARY KEY,
    project_id  text NOT NULL,
    name        text NOT NULL,
    "group"     text NOT NULL,
    config      jsonb NOT NULL,  -- {"config": <text or map>, "inputs": [...], "outputs": [...], "options": {...}}
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX software_configs_project ON software_configs (project_id, created_at, config_id);
