"""The web app: static files both services serve at ``/`` (docs/design.md section 11).

Hand-written ES modules with no build step; this package imports neither agent nor cloud, and
both install it with :func:`install_webui`.
"""

from webui.serve import ASSET_PREFIX, PAGE_PATHS, WebUi, install_webui

__all__ = ["ASSET_PREFIX", "PAGE_PATHS", "WebUi", "install_webui"]
