/**
 * The services whose google.api.http annotations become REST paths. A module of its own (it
 * imports only generated code) so that the REST codec worker can load it cheaply.
 */
import { PalmService } from "../../gen/palm/v1/palm_pb.js";

/** REST_SERVICES are the services whose google.api.http annotations become REST paths. */
export const REST_SERVICES = Object.freeze([PalmService]);
