"""Test suites shipped with the package so plug-in learners and storages can reuse them."""
