"""``database:`` in talon.yaml: which engine holds the store.

Absent (or ``url: null``): the SQLite file ``talon.db`` in ``data_dir``, the one-node default.
A ``postgresql://`` URL: a PostgreSQL database (docs/scaling.md), usually given as
``${TALON_DATABASE_URL}`` so its password stays out of the file.
"""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from gateway.model_types import StrictModel

__all__ = ["DatabaseSettings"]


def _host_name() -> str:
    """The host name as a node id (characters a node id may not hold become ``-``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:64].lstrip("._-")
    return name or "node"


class DatabaseSettings(StrictModel):
    url: str | None = Field(
        None,
        description="postgresql://user:password@host:5432/dbname (usually ${TALON_DATABASE_URL}); "
        "null = the SQLite file talon.db in data_dir",
    )

    standby: bool = Field(
        False,
        description="when another daemon holds the database, wait and take over once it is gone "
        "(a hot standby, docs/scaling.md); false = refuse to start",
    )
    standby_poll: float = Field(
        1.0, gt=0, le=60, description="seconds between a standby's checks whether the database is free"
    )
    cluster: bool = Field(
        False,
        description="run as one of several active nodes on this database, sharing the work "
        "(docs/scaling.md); every node has the same talon.yaml and its own data_dir",
    )
    node_id: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="this node's name in the cluster (letters, digits, . _ -); null = the host name",
    )
    failover_seconds: float = Field(
        15.0,
        ge=3,
        le=300,
        description="seconds after which a silent node counts as gone and its work, its Telegram "
        "poller and the scheduler move to another node",
    )

    @field_validator("url")
    @classmethod
    def _postgresql_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError(
                f"must be a postgresql:// URL such as postgresql://talon:secret@127.0.0.1:5432/talon, "
                f"not {parts.scheme or 'a bare'}:// (leave it out for the SQLite file in data_dir)"
            )
        if not parts.path.strip("/"):
            raise ValueError(
                "name the database at the end of the URL: postgresql://user:password@host:5432/talon"
            )
        return value

    @model_validator(mode="after")
    def _standby_needs_postgresql(self) -> DatabaseSettings:
        if self.standby and not self.url:
            raise ValueError("standby: true needs database.url: a standby waits for a PostgreSQL database")
        if self.cluster and not self.url:
            raise ValueError(
                "cluster: true needs database.url: the nodes of a cluster share one PostgreSQL database"
            )
        if self.cluster and self.standby:
            raise ValueError(
                "cluster: true and standby: true do not go together: every cluster node is active and takes "
                "over a lost node's work; leave standby out"
            )
        return self

    def node_name(self) -> str:
        """This node's id: ``node_id``, else the host name."""
        return self.node_id or _host_name()

    @property
    def heartbeat_seconds(self) -> float:
        """How often a cluster node beats and looks at what the others left: a third of
        ``failover_seconds``, so a node is found lost after three missed beats."""
        return max(1.0, self.failover_seconds / 3)

    def cluster_node(self) -> str | None:
        """This node's id when it is one of a cluster's nodes, else None (the only node)."""
        return self.node_name() if self.cluster else None

    @property
    def password(self) -> str | None:
        """The URL's password, for log redaction."""
        return urlsplit(self.url).password if self.url else None
