"""EAGLE-style drafter for Gated DeltaNet targets: a pure-PyTorch target model, the drafter layer,
its training tool and the test fixture writer (see lib/spec/eagle_drafter.md)."""
