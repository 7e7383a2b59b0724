-- Converge's initial schema. The engine is the only writer.
-- Later issues refine it with new migration files; never edit an applied one.

-- Engines heartbeat here; work held by an engine whose heartbeat is stale is
-- taken over by a live one.
CREATE TABLE engines (
    engine_id     uuid PRIMARY KEY,
    hostname      text NOT NULL,
    pid           integer NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now()
);

-- A stack's goal: one row per operation (template + environment + inputs).
CREATE TABLE templates (
    template_id   uuid PRIMARY KEY,
    stack_id      uuid NOT NULL,
    template      jsonb NOT NULL,
    environment   jsonb NOT NULL DEFAULT '{}',
    files         jsonb NOT NULL DEFAULT '{}',
    parameters    jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX templates_stack ON templates (stack_id);

CREATE TABLE stacks (
    stack_id              uuid PRIMARY KEY,
    project_id            text NOT NULL,
    name                  text NOT NULL,
    owner_stack_id        uuid REFERENCES stacks (stack_id),
    owner_resource_id     bigint,
    action                text NOT NULL,
    status                text NOT NULL,
    status_reason         text NOT NULL DEFAULT '',
    -- Preemption: a newer operation replaces this one field; checks carrying
    -- another traversal id stop quietly.
    current_traversal     uuid,
    current_template_id   uuid REFERENCES templates (template_id),
    previous_template_id  uuid REFERENCES templates (template_id),
    disable_rollback      boolean NOT NULL DEFAULT false,
    timeout_mins          integer,
    tags                  text[] NOT NULL DEFAULT '{}',
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz,
    deleted_at            timestamptz
);
CREATE UNIQUE INDEX stacks_live_name ON stacks (project_id, name) WHERE deleted_at IS NULL;
CREATE INDEX stacks_owner ON stacks (owner_stack_id);

-- One row per real resource (a replacement is a new row). `requires` stores
-- the rows this one depended on when it was last converged, so cleanup
-- order survives templates that reorder dependencies.
CREATE TABLE resources (
    resource_id      bigserial PRIMARY KEY,
    stack_id         uuid NOT NULL REFERENCES stacks (stack_id) ON DELETE CASCADE,
    name             text NOT NULL,
    type             text NOT NULL,
    physical_id      text,
    action           text NOT NULL DEFAULT 'INIT',
    status           text NOT NULL DEFAULT 'COMPLETE',
    status_reason    text NOT NULL DEFAULT '',
    properties       jsonb,
    attributes       jsonb NOT NULL DEFAULT '{}',
    requires         bigint[] NOT NULL DEFAULT '{}',
    replaces         bigint,
    replaced_by      bigint,
    template_id      uuid,
    -- Compare-and-swap ownership: the engine acting on this row, and the
    -- traversal it acts for. No stack lock.
    engine_id        uuid,
    traversal_id     uuid,
    version          integer NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX resources_stack_name ON resources (stack_id, name);

-- A node with several predecessors waits here until all have reported.
CREATE TABLE sync_points (
    traversal_id  uuid NOT NULL,
    entity_id     bigint NOT NULL,
    is_update     boolean NOT NULL,
    stack_id      uuid NOT NULL,
    input_data    jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (traversal_id, entity_id, is_update)
);
CREATE INDEX sync_points_stack ON sync_points (stack_id);

CREATE TABLE events (
    event_seq             bigserial PRIMARY KEY,
    event_id              uuid NOT NULL UNIQUE,
    stack_id              uuid NOT NULL,
    resource_name         text NOT NULL,
    physical_resource_id  text,
    resource_type         text,
    action                text NOT NULL,
    status                text NOT NULL,
    reason                text NOT NULL DEFAULT '',
    created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_stack ON events (stack_id, event_seq);

-- Transactional outbox: messages committed with the state change that caused
-- them, published afterwards (by any live engine if this one dies).
CREATE TABLE outbox (
    outbox_id    bigserial PRIMARY KEY,
    queue        text NOT NULL,
    body         jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    claimed_by   uuid,
    claimed_at   timestamptz
);

-- Inbox: ids of messages whose effects are committed, so a redelivery is a no-op.
CREATE TABLE inbox (
    message_id    text PRIMARY KEY,
    processed_at  timestamptz NOT NULL DEFAULT now()
);
