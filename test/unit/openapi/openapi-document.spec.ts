/**
 * gen/openapi/openapi.json, written by scripts/protoc-gen-openapi.ts during `buf generate` (CI
 * fails when the committed file differs from a fresh generation): a valid OpenAPI 3.1 document
 * holding every REST route, every field of the proto messages and every code of the error table.
 */
import { readFileSync } from "node:fs";
import type { DescMessage } from "@bufbuild/protobuf";
import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { ERRORS } from "../../../src/errors.js";
import { OPENAPI_FILE } from "../../../src/http/web-handler.js";
import { restRoutesOf } from "../../../src/rest/rest-routes.js";
import { REST_SERVICES } from "../../../src/rest/rest-services.js";
import { PUBLIC_METHODS } from "../../../src/server/routes.js";

const doc = JSON.parse(readFileSync(OPENAPI_FILE, "utf8"));
const routes = restRoutesOf(REST_SERVICES);

/** refsOf lists every $ref in `node`. */
function refsOf(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const n of node) refsOf(n, out);
  else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === "$ref" && typeof v === "string") out.push(v);
      else refsOf(v, out);
    }
  }
  return out;
}

describe("gen/openapi/openapi.json", () => {
  it("validates as OpenAPI 3.1", async () => {
    const validator = new Validator();
    const res = await validator.validate(structuredClone(doc));
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("resolves every $ref inside the document", () => {
    const refs = refsOf(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      expect(ref).toMatch(/^#\/components\/schemas\//);
      expect(doc.components.schemas).toHaveProperty([ref.slice("#/components/schemas/".length)]);
    }
  });

  it.each(routes.map((r) => [r.httpMethod, r.path, r] as const))(
    "has the REST route %s %s with its RPC's schemas",
    (method, path, route) => {
      const op = doc.paths[path]?.[method.toLowerCase()];
      expect(op).toBeDefined();
      expect(op["x-rpc"]).toBe(`/${route.method.parent.typeName}/${route.method.name}`);
      expect(op.responses["200"].content["application/json"].schema).toEqual({
        $ref: `#/components/schemas/${route.method.output.typeName}`,
      });
      if (route.body === "*") {
        expect(op.requestBody.content["application/json"].schema).toEqual({ $ref: `#/components/schemas/${route.method.input.typeName}` });
      } else {
        expect(op.requestBody).toBeUndefined();
      }
      const isPublic = PUBLIC_METHODS.some((m) => m === route.method);
      expect(op.security).toEqual(isPublic ? [] : [{ ApiKey: [] }]);
    },
  );

  it("offers the photo of POST /v1/palm/analyze as a form's file part or as the raw file, beside JSON", () => {
    const content = doc.paths["/v1/palm/analyze"].post.requestBody.content;
    expect(Object.keys(content).sort()).toEqual(["application/json", "image/jpeg", "image/png", "multipart/form-data"]);
    expect(content["multipart/form-data"].schema.required).toEqual(["image"]);
    expect(content["image/jpeg"].schema).toEqual({ type: "string", contentMediaType: "image/jpeg" });
  });

  it("lists no path the server does not route", () => {
    const served = new Set(routes.map((r) => `${r.httpMethod.toLowerCase()} ${r.path}`));
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops as object).map((m) => `${m} ${p}`));
    expect(documented.sort()).toEqual([...served].sort());
  });

  it.each(Object.entries(ERRORS))("has the error code %s, answered with its HTTP status", (reason, spec) => {
    expect(doc.components.schemas.ErrorCode.enum).toContain(reason);
    expect(doc.components.schemas.ErrorCode["x-enum-descriptions"][reason]).toBe(spec.message);
    const statuses = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops as Record<string, any>).flatMap((op) =>
        Object.entries(op.responses as Record<string, any>)
          .filter(([, r]) => String(r.description).includes(`\`${reason}\``))
          .map(([status]) => Number(status)),
      ),
    );
    // not_found (no route) and canceled (never sent) belong to no route's responses.
    if (reason === "not_found" || reason === "canceled") expect(statuses).toEqual([]);
    else expect(new Set(statuses)).toEqual(new Set([spec.httpStatus]));
  });

  it("describes every field of every message a route reads or writes, by its proto name", () => {
    const seen = new Set<string>();
    const check = (m: DescMessage) => {
      if (seen.has(m.typeName) || m.typeName.startsWith("google.protobuf.")) return;
      seen.add(m.typeName);
      const schema = doc.components.schemas[m.typeName];
      expect(schema, m.typeName).toBeDefined();
      expect(Object.keys(schema.properties ?? {}).sort(), m.typeName).toEqual(m.fields.map((f) => f.name).sort());
      for (const f of m.fields) if (f.message) check(f.message);
    };
    for (const r of routes) {
      if (r.body !== "") check(r.method.input);
      check(r.method.output);
    }
    // 64-bit integers are JSON numbers on the REST surface (src/rest/rest-json.ts), bytes base64.
    expect(doc.components.schemas["palm.v1.Usage"].properties.resets_at).toMatchObject({ type: "integer", format: "int64" });
    expect(doc.components.schemas["palm.v1.AnalyzeRequest"].properties.image).toMatchObject({ type: "string", contentEncoding: "base64" });
  });
});
