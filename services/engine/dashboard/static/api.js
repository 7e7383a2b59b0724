// The dashboard's only way to the engine: JSON calls under /v1/{project} with the
// X-Auth-Token header, and the live event stream read with fetch() (EventSource
// cannot send headers), parsed as server-sent events.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export class Api {
  constructor(token, project) {
    this.token = token;
    this.project = project;
  }

  url(path) {
    return `/v1/${encodeURIComponent(this.project)}${path}`;
  }

  async call(method, path, body) {
    const headers = { "X-Auth-Token": this.token, Accept: "application/json" };
    const init = { method, headers };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(this.url(path), init);
    const text = await response.text();
    let data = null;
    if (text && (response.headers.get("Content-Type") || "").startsWith("application/json")) {
      data = JSON.parse(text);
    }
    if (!response.ok) {
      const message = data?.error?.message || data?.explanation || `${response.status} ${response.statusText}`;
      throw new ApiError(response.status, message);
    }
    return data;
  }

  stackPath(stack) {
    return `/stacks/${encodeURIComponent(stack.name)}/${encodeURIComponent(stack.id)}`;
  }

  /**
   * Follow a stack's stream from `after`, calling onMessage({event, id, data}) for each
   * message; reconnects (from the last id) after a dropped connection until `signal` aborts
   * or the stack is gone. Resolves when it stops.
   */
  async follow(stack, after, onMessage, signal, onState = () => {}) {
    let cursor = after;
    while (!signal.aborted) {
      try {
        const response = await fetch(this.url(`${this.stackPath(stack)}/stream?after=${cursor}`), {
          headers: { "X-Auth-Token": this.token, Accept: "text/event-stream" },
          signal,
        });
        if (response.status === 404) return;
        if (!response.ok) throw new ApiError(response.status, `stream answered ${response.status}`);
        onState("live");
        for await (const message of sseMessages(response.body, signal)) {
          if (message.id) cursor = Number(message.id);
          if (message.event === "gone") {
            onMessage(message);
            return;
          }
          onMessage(message);
        }
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof ApiError && error.status === 401) throw error;
      }
      onState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** Server-sent events from a byte stream: {event, id, data (parsed JSON)} per message. */
export async function* sseMessages(body, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    while (!signal.aborted) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const message = { event: "message", id: null, data: "" };
        for (const line of block.split("\n")) {
          if (!line || line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") message.event = text;
          else if (field === "id") message.id = text;
          else if (field === "data") message.data += (message.data ? "\n" : "") + text;
        }
        if (message.data) {
          message.data = JSON.parse(message.data);
          yield message;
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
}
