import { describe, expect, it } from "vitest";
import { Health } from "../../../gen/grpc/health/v1/health_pb.js";
import { PalmService } from "../../../gen/palm/v1/palm_pb.js";
import { createRestTable, restRoutesOf } from "../../../src/rest/rest-routes.js";

describe("restRoutesOf()", () => {
  it("reads the google.api.http annotations of PalmService", () => {
    const routes = restRoutesOf([PalmService]).map((r) => [r.httpMethod, r.path, r.body, r.method.name]);
    expect(routes).toEqual([
      ["POST", "/v1/palm/analyze", "*", "Analyze"],
      ["GET", "/v1/palm/health", "", "Health"],
    ]);
  });

  it("gives unannotated services no REST path", () => {
    expect(restRoutesOf([Health])).toEqual([]);
  });
});

describe("createRestTable()", () => {
  it("indexes routes by path and method", () => {
    const table = createRestTable(restRoutesOf([PalmService]));
    expect([...table.keys()]).toEqual(["/v1/palm/analyze", "/v1/palm/health"]);
    expect(table.get("/v1/palm/health")?.get("GET")?.method.name).toBe("Health");
  });

  it("refuses a duplicate route", () => {
    const routes = restRoutesOf([PalmService]);
    expect(() => createRestTable([...routes, routes[0]])).toThrow("duplicate REST route POST /v1/palm/analyze");
  });
});
