"""The one-file offline HTML report: page, sections, figures, tables, assets. No torch, no Ray."""
