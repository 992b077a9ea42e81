"""The console's screens, one module per screen. Each view answers a full page or, for htmx, the
fragment that the page includes; views call `memconsole.memory` (its operations and the read-side
`queries`): they write no query of their own and never touch the vector index or the ciphers."""
