"""The backend of a PostgreSQL server of the user's (DATABASE_URL, and each of
DATABASE_REPLICA_URLS): Django's, connecting and waiting within a request's
deadline (runtime.postgres.deadline), as the embedded server's backend does."""

from runtime.postgres.deadline import DatabaseWrapper

__all__ = ["DatabaseWrapper"]
