-- Fixture: a test parked in shield.sleep past --timeout names its line.
describe("timeout", function()
  it("waits too long", function()
    shield.sleep(60000)
  end)
  it("still runs", function() end)
end)
