from jaxrel.cli import main

raise SystemExit(main())
