"""What the tests share: servers they start (NATS, an OpenAI-compatible one, OTLP, headless
Chromium), fakes, the CLI runner, run builders, and the paths of the repository. Imported as
``support.<module>``; ``tests/conftest.py`` turns the common ones into fixtures."""
