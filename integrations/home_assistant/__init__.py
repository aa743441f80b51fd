"""The home-automation hub (Home Assistant) as both the agent and the cloud talk to it.

``client`` speaks the hub's REST API (directly or through an access proxy) and classifies its
failures; ``settings`` checks the configuration at start-up; ``fake`` and ``fake_proxy`` are an
in-repository hub and access proxy that follow Home Assistant's and the proxy's documented
behaviour, for the tests and for trying the feature by hand. This package imports neither the
agent nor the cloud.
"""
