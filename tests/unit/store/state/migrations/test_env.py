"""The revisions run only through ``store.state.migrations.upgrade``, on the caller's connection: Alembic run on
its own (a config without that connection) is refused before it connects anywhere."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.config import Config

from store.state import migrations


def test_alembic_run_on_its_own_is_refused_naming_the_way_in() -> None:
    config = Config()
    config.set_main_option("script_location", str(migrations.FOLDER))
    with pytest.raises(RuntimeError, match=r"run through store.state.migrations.upgrade\(connection\), not alembic"):
        command.upgrade(config, "head")
