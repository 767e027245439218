"""Alembic migrations of the service's schema, applied by :func:`purebandits.service.storage.upgrade`."""
