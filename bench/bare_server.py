"""The baseline: a bare aiohttp JSON handler, nothing else."""

from __future__ import annotations

import sys

from aiohttp import web

PAYLOAD = {"status": "healthy", "items": [{"id": i, "name": f"farm {i}"} for i in range(5)]}


async def handler(_: web.Request) -> web.Response:
    """Answer a small constant JSON object."""
    return web.json_response(PAYLOAD)


def main() -> None:
    """Serve on the port given as the first argument."""
    app = web.Application()
    app.router.add_get("/", handler)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


if __name__ == "__main__":
    main()
