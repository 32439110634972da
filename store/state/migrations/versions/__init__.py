"""The state database's revisions, one file each (a package, so a wheel ships them)."""
