-- Software deployments (issue 20 item 2): Heat's /software_deployments, written by the
-- API and by the engine for OS::Heat::SoftwareDeployment and StructuredDeployment (the
-- deployment id is the resource's physical id). `config_id` is the derived config the
-- server runs (the source config with the deployment's inputs). `stack_id` and
-- `resource_name` name the resource a deployment belongs to (NULL for one made through
-- the API), so the agent's signal completes that resource's job. `project_id` scopes
-- every read, so another project's deployment is not found.
CREATE TABLE software_deployments (
    deployment_id  uuid PRIMARY KEY,
    project_id     text NOT NULL,
    server_id      text NOT NULL,
    config_id      uuid NOT NULL,
    input_values   jsonb NOT NULL DEFAULT '{}',
    output_values  jsonb NOT NULL DEFAULT '{}',
    action         text NOT NULL,
    status         text NOT NULL,
    status_reason  text NOT NULL DEFAULT '',
    stack_id       uuid,
    resource_name  text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz
);
CREATE INDEX software_deployments_project ON software_deployments (project_id, created_at, deployment_id);
CREATE INDEX software_deployments_server ON software_deployments (project_id, server_id, created_at);
