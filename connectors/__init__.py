"""Connectors: one package per backend kind, each implementing connectors.base.Connector."""
