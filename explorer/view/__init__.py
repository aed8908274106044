"""How a run is drawn: the page's content as data (`content`), the live view and its feed (`live`,
`live_status`, `feed`, `status_words`), charts kept in place (`chart`, `look`), stored runs overlaid
and compared (`overlay`, `compare`), seed bands (`seeds`) and line settings (`line_controls`)."""
