-- Run only with --pattern _test.
describe("other", function()
  it("is picked by its pattern", function() end)
end)
