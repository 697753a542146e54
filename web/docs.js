// GET /docs: swagger-ui-dist (served by this service from node_modules, no CDN) rendering the
// OpenAPI document that buf generates from proto/ (GET /openapi.json).
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  tryItOutEnabled: false,
  validatorUrl: null, // swagger-ui would otherwise ask an online validator for a badge
});
