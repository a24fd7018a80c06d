// The service's API as the page calls it: the token kept for the session, every call with Bearer.
//
// The login URL ("/?token=...") hands the token once: it is moved to sessionStorage (this tab,
// until it closes) and removed from the address bar and history, so it is neither bookmarked
// nor shown on screen. Every call sends "Authorization: Bearer <token>"; the page never relies on
// the cookie the login URL also sets.

const KEY = "tavernbox.token";

export function adoptTokenFromUrl() {
  const url = new URL(window.location.href);
  const token = url.searchParams.get("token");
  if (token) {
    sessionStorage.setItem(KEY, token);
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + (url.search || "") + url.hash);
  }
  return sessionStorage.getItem(KEY);
}

export function setToken(token) {
  if (token) sessionStorage.setItem(KEY, token);
  else sessionStorage.removeItem(KEY);
}

export function hasToken() {
  return Boolean(sessionStorage.getItem(KEY));
}

export class ApiError extends Error {
  constructor(status, error) {
    super(error && error.message ? error.message : "HTTP " + status);
    this.status = status;
    this.error = error || { code: "HTTP_" + status, message: "HTTP " + status };
  }
}

// Call the API: resolves {status, body, ms}; a non-JSON or network failure becomes ApiError.
export async function call(method, path, body, headers) {
  const token = sessionStorage.getItem(KEY) || "";
  const init = { method, headers: { Authorization: "Bearer " + token, ...(headers || {}) }, cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const started = performance.now();
  let answer;
  try {
    answer = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, { code: "NETWORK", message: "the service did not answer: " + err.message });
  }
  let data = null;
  try {
    data = await answer.json();
  } catch {
    throw new ApiError(answer.status, { code: "HTTP_" + answer.status, message: "the answer was not JSON" });
  }
  const ms = performance.now() - started;
  if (answer.status === 401) throw new ApiError(401, data.error);
  const peak = answer.headers.get("X-Tavernbox-Peak-Bytes");
  return { status: answer.status, body: data, ms, etag: answer.headers.get("ETag"),
           peakBytes: peak === null ? undefined : Number(peak) };
}
