"""The home-automation hub (Home Assistant) as both the agent and the cloud talk to it: the whole
integration in one package (docs/design.md section 2).

Shared by both sides, importing neither: ``client`` speaks the hub's REST API (directly or
through an access proxy) and classifies its failures; ``live`` and ``state_relay`` follow its
WebSocket event stream into the stream fan-out; ``settings`` declares and checks the
configuration; ``service`` is the integration's logic over what each side hands in, ``lifetime``
starts and stops it, ``routes`` and ``schemas`` its API; ``closes`` and ``ownership`` the durable
irrigation closes and the farm each entity belongs to; ``fake`` and ``fake_proxy`` are an
in-repository hub and access proxy that follow Home Assistant's and the proxy's documented
behaviour, for the tests and for trying the feature by hand.

``agent_side`` builds on the agent (MQTT discovery of the farm's devices, SQLite stores,
wiring, handlers) and ``cloud_side`` on the cloud (PostgreSQL stores, wiring, handlers).
"""
