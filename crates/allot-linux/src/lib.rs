//! allot's kernel boundary. Thin, typed readers and writers; no policy lives here.
