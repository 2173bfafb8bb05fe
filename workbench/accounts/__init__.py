"""Teams, memberships with roles, and the access layer every other app scopes its queries with."""
