"""Predictors of measurement rows, one module per kind; importing this package registers them."""
