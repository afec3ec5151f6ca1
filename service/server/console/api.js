// The REST and WebSocket API as the console calls it: same origin, JSON bodies with a
// JSON content type, and the bearer token the user gave (kept in this tab only).

const TOKEN_KEY = "scemon.token";

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail && detail.message ? detail.message : `HTTP ${status}`);
    this.status = status;
    this.detail = detail || {};
  }
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** fetch `path` (relative to the page, so the console works behind a path prefix) and
 * return its JSON, or null for 204; a 4xx/5xx throws ApiError with the server's detail. */
export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  const bearer = token.get();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  // Every state-changing request says it is JSON, with or without a body: the server
  // refuses others from browsers (a cross-site form could send them without asking).
  if (method !== "GET") headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(new URL(path, document.baseURI), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      mode: "same-origin",
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (err) {
    throw new ApiError(0, { message: `the service does not answer (${err.message})` });
  }
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = data && typeof data.detail === "object" ? data.detail : { message: response.statusText };
    throw new ApiError(response.status, detail);
  }
  return data;
}

/** ws:// or wss:// URL of `path` on this origin, with query parameters. */
export function socketUrl(path, params) {
  const url = new URL(path, document.baseURI);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  return url.toString();
}

/** A browser cannot set headers on a WebSocket: the token goes as a subprotocol,
 * `scemon.bearer.<base64url>`, offered beside `scemon`, which the server picks. */
export function socketProtocols() {
  const bearer = token.get();
  if (!bearer) return [];
  const bytes = new TextEncoder().encode(bearer);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  const encoded = btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return ["scemon", `scemon.bearer.${encoded}`];
}
