"""What runs the project: the embedded PostgreSQL (its backend, probe and
watchdog), the read-replica router, and `serve`, the process supervisor.

The apps may import from here; nothing here belongs to one app.
"""
