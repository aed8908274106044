"""The pages and their widgets: the navigation (`pages`), the home, a scenario page, the Runs page
and the Glossary; the controls generated from a Config, the URL, sharing, auto-run, and the
server's session (its store and pool)."""
