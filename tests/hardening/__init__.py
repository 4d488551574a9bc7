"""The hardening probes (issues 25, 50): their definitions (``probes``) and the tests that run them."""
