"""The POS provider's API as the cloud speaks it: a client for Square's v2 API (Bearer token,
``Square-Version``, cursor pagination, ``{"errors": [...]}`` bodies), its resources, the
webhook signature, and an in-repo fake of the provider (``fake/``) for tests and trying it out.

docs/design.md section 9. Nothing here touches the database or the web layer.
"""
