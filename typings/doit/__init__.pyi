# The parts of doit (pydoit 0.37) Pinakes uses, typed: doit ships no annotations. The sync runs it
# through sync/loader.py and `pnk doit` through cli/cmd_doit.py; tests load namespaces with doit.loader.
