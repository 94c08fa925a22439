-- Fixture: never found, directories starting with "." are skipped.
it("must not run", function() error("a hidden directory was searched") end)
