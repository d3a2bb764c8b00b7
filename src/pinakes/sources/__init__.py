"""What the KB's source roots hold: the walk over them (`walk.py`), a library that sync, links and
doctor share; the doit task that runs it during a sync is `pinakes.rules.walk`."""
