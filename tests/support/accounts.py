"""The first admin every test agent is started with (light to import: the benches' worker
processes import it too)."""

ADMIN_EMAIL = "admin@farm.test"
ADMIN_PASSWORD = "correct horse battery staple"
