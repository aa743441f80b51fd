"""HTTP conventions shared by agent and cloud: endpoints, middlewares, rate limits, OpenAPI."""
