from pinakes.cli import main

raise SystemExit(main())
