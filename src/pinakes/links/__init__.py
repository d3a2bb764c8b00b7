"""Links between documents: the authored ones a sidecar carries, as the index stores them (spec §3).

`store.write_links` is the one writer of a document's `origin = 'sidecar'` rows; sync calls it
whenever it indexes a document or refreshes its metadata.
"""
