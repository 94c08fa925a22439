-- Fixture: a test past --timeout names the line it was at, whether parked
-- in a blocking call or spinning without yielding.
describe("timeout", function()
  it("waits too long", function()
    shield.sleep(60000)
  end)
  it("spins", function()
    local n = 0
    while true do n = n + 1 end -- one line: the interrupt lands on it
  end)
  it("still runs", function() end)
end)
