"""The crowdsourcing service: an ASGI app that steers live experiments with any registered learner.

``create_app(settings)`` builds the FastAPI app (nothing is created at import time);
:class:`purebandits.service.study.Study` holds the protocol, independent of HTTP.
"""
