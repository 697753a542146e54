/**
 * A large upload on a connection of its own, its answer read while it is still sent. Free of
 * vitest, so that the benchmark's attacker (bench/abuse-clients.ts) and the tests share it.
 */
import http from "node:http";

/**
 * postLarge sends `body` over its own HTTP/1.1 connection (fetch would share a few). A server that
 * answers before the body is sent closes the connection once it has discarded a bounded part of
 * the rest (src/wire/private-apis.ts, lingerOnClose): the write then fails, and the answer is
 * whatever status came before, else the error's code.
 */
export function postLarge(port: number, key: string, body: Buffer): Promise<string> {
  return new Promise((resolve) => {
    let status: number | undefined;
    let code = "";
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path: "/v1/palm/analyze?images=none",
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key },
        agent: false,
      },
      (res) => {
        status = res.statusCode;
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("error", () => {});
        res.on("end", () => {
          try {
            code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? "";
          } catch {}
          resolve(`${status} ${code}`.trim());
        });
      },
    );
    req.on("error", (e: NodeJS.ErrnoException) => resolve(status === undefined ? `${e.code ?? "error"}` : `${status} (body cut)`));
    req.on("close", () => resolve(status === undefined ? "closed" : `${status} ${code}`.trim()));
    req.end(body);
  });
}
