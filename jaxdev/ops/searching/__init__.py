"""Searching and binning, by concern: searchsorted, bucketize and isin (search), unique, and histograms
(histc, bincount, histogram, histogramdd). Importing the package registers them all."""

from jaxdev.ops.searching import histograms, search, unique  # noqa: F401
