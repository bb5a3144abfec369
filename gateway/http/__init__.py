"""The optional HTTP server: one aiohttp application that features (metrics, webhooks,
the console, web chat) add their routes to. Off unless ``http:`` is in talon.yaml."""
